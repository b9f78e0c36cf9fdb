"""Pictures of what happened: a Gantt-like timeline per instance and the Ready capacity per pool over time, in one
self-contained file (SVG, PNG or PDF, drawn with matplotlib: the ``charts`` extra).

``charts.model`` holds the picture's data (pure, no plotting library); ``charts.runrecord`` builds it from a refresh
run's ``RUN#`` record (``core.runs.Run``); ``charts.render`` draws it. The CLI (``node-manager status --run ID --chart
FILE``) and the scenarios (``python -m scenarios NAME --chart FILE``, ``scenarios.fleetchart``) both use it.
"""
