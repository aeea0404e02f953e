"""Generic wrapping machinery: knows nothing of verl.

``registry`` applies and undoes ``wrapt`` wrappers lazily (post-import hooks); ``signatures`` checks a
seam against what its wrapper reads and warns once about drift; ``ray_actors`` re-applies seams on Ray's
per-class method copies; ``context`` is the OTel-context fast path; ``threads`` carries contexts into
executor and ``threading`` threads.
"""
