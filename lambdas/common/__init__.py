"""What the Lambdas share: the AWS call wrapper and error translation, the cluster's Auto Scaling look-up, the
command sender (``aws``), the executor loop with dry-run (``execute``), and the handlers' wiring (``handler``)."""
