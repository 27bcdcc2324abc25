// Package dynamo is the DynamoDB dedupe store of sqsonce.
package dynamo
