#!/usr/bin/env bash
# Runs inside LocalStack once it is ready: the demo resources, named exactly
# as localstack/setup creates them on the no-Docker stack.
set -euo pipefail
region=${AWS_DEFAULT_REGION:-us-east-1}
arn() { awslocal sqs get-queue-attributes --queue-url "$1" --attribute-names QueueArn --query Attributes.QueueArn --output text; }

dlq=$(awslocal sqs create-queue --queue-name sqsonce-demo-dlq --query QueueUrl --output text)
awslocal sqs create-queue --queue-name sqsonce-demo \
	--attributes "{\"RedrivePolicy\":\"{\\\"deadLetterTargetArn\\\":\\\"$(arn "$dlq")\\\",\\\"maxReceiveCount\\\":\\\"5\\\"}\"}"

fdlq=$(awslocal sqs create-queue --queue-name sqsonce-demo-dlq.fifo --attributes FifoQueue=true --query QueueUrl --output text)
awslocal sqs create-queue --queue-name sqsonce-demo.fifo \
	--attributes "{\"FifoQueue\":\"true\",\"RedrivePolicy\":\"{\\\"deadLetterTargetArn\\\":\\\"$(arn "$fdlq")\\\",\\\"maxReceiveCount\\\":\\\"5\\\"}\"}"

awslocal dynamodb create-table --table-name sqsonce-dedupe \
	--attribute-definitions AttributeName=pk,AttributeType=S \
	--key-schema AttributeName=pk,KeyType=HASH \
	--billing-mode PAY_PER_REQUEST --region "$region"
awslocal dynamodb update-time-to-live --table-name sqsonce-dedupe \
	--time-to-live-specification Enabled=true,AttributeName=expires_at --region "$region"

# Bodies too large for a message (producer.PayloadConfig).
awslocal s3 mb s3://sqsonce-demo-payloads --region "$region" || true
