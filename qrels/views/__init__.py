"""The qrels app's pages, one module a page: ``export`` (build and download bundles), ``reports``
(the Reports tab and the poll of a report job), ``agreement``, ``evaluation``, ``stability`` and
``pool_bias``; ``common`` holds what the report pages share. No module here imports numpy,
pytrec_eval, ir_measures or krippendorff at its top: a web process loads every view module, and
only a report being computed needs them (tests/architecture pins it)."""
