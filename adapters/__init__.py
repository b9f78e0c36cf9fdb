"""The adapter layer: the only code that imports boto3 or botocore (AWS APIs, the DynamoDB state table)."""
