"""The step's account: what each part usually takes (:mod:`.baselines`), what moved in the step (:mod:`.anomalies`,
:mod:`.stalls`, :mod:`.short_run`), what each cost the step's end (:mod:`.peel`), and the account itself, part by
part against the step's usual (:mod:`.step_account`; as findings.json writes it: :mod:`.account_json`)."""
