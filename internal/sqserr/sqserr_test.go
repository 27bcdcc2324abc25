package sqserr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sqsonce/sqsonce/internal/sqserr"
)

func TestQueueMissing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&types.QueueDoesNotExist{}, true},
		{fmt.Errorf("wrapped: %w", &types.QueueDoesNotExist{}), true},
		{&smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue"}, true},
		{&smithy.GenericAPIError{Code: "NonExistentQueue"}, true},
		{&smithy.GenericAPIError{Code: "AccessDenied", Message: "queue does not exist"}, false},
		{errors.New("QueueDoesNotExist"), false},
		{nil, false},
	} {
		if got := sqserr.QueueMissing(tc.err); got != tc.want {
			t.Errorf("QueueMissing(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestMessageRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&types.InvalidMessageContents{}, true},
		{fmt.Errorf("wrapped: %w", &types.InvalidAttributeValue{}), true},
		{&smithy.GenericAPIError{Code: "AWS.SimpleQueueService.InvalidParameterValue", Message: "Message must be shorter than 1024 bytes."}, true},
		{&smithy.GenericAPIError{Code: "InvalidParameterValue"}, true},
		{&smithy.GenericAPIError{Code: "ThrottlingException"}, false},
		{&types.QueueDoesNotExist{}, false},
		{errors.New("InvalidParameterValue"), false},
		{nil, false},
	} {
		if got := sqserr.MessageRefused(tc.err); got != tc.want {
			t.Errorf("MessageRefused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
