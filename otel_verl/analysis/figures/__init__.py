"""One module per figure of the seed's analysis: ``compute_x(spans) -> DataFrame`` and ``plot_x(df, path)``.

Each module also offers ``plotly_x(df)`` for the interactive HTML report.
"""
