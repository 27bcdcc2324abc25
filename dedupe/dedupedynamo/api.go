package dedupedynamo

import (
	"context"
	"errors"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sqsonce/sqsonce/internal/dynamolease"
)

// DynamoDBAPI is the part of the DynamoDB client sqsonce uses: one method
// per call made. *dynamodb.Client implements it.
type DynamoDBAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// IsTransient reports whether err is a DynamoDB error that a retry can fix:
// throttling, a transaction conflict, a request limit, or a 5xx. Errors
// are classified by type and error code, never by message.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var (
		pte *types.ProvisionedThroughputExceededException
		rle *types.RequestLimitExceeded
		tce *types.TransactionConflictException
		tip *types.TransactionInProgressException
		ise *types.InternalServerError
		can *types.TransactionCanceledException
	)
	switch {
	case errors.As(err, &pte), errors.As(err, &rle), errors.As(err, &tce), errors.As(err, &tip), errors.As(err, &ise):
		return true
	case errors.As(err, &can):
		for _, r := range can.CancellationReasons {
			switch code(r) {
			case dynamolease.ReasonTransactionConflict, dynamolease.ReasonThrottling, dynamolease.ReasonProvisionedThroughput:
				return true
			}
		}
		return false
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ThrottlingException", "Throttling", "ServiceUnavailable", "InternalFailure", "InternalServerError":
			return true
		}
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= http.StatusInternalServerError {
		return true
	}
	return false
}

// isValidation reports a request DynamoDB rejected as invalid.
func isValidation(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException"
}

func code(r types.CancellationReason) string { return dynamolease.Code(r) }
