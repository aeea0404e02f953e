"""What holds across steps or peers: persistent stragglers, trends, behaviour shifts, the long tail, what aborted
requests wasted and what bound an asynchronous step."""
