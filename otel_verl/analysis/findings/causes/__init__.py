"""The causes a step's account names (:mod:`.naming`; the record :mod:`.cause`), their severity (:mod:`.severity`),
their messages (:mod:`.messages`), and one name for one cause (:mod:`.fold_patterns`: a pattern across steps folds
the causes it explains)."""
