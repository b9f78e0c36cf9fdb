"""AWS API adapters (Auto Scaling, EC2, SQS, EventBridge, CloudWatch) over one call wrapper (``calls``)."""
