package sqserr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sqsonce/sqsonce/internal/sqserr"
)

func TestPersistent(t *testing.T) {
	t.Parallel()
	op := func(err error) error {
		return &smithy.OperationError{ServiceID: "SQS", OperationName: "ReceiveMessage", Err: err}
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{op(&types.QueueDoesNotExist{}), true},
		{op(&smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue"}), true},
		{op(&types.KmsAccessDenied{}), true},
		{op(&types.KmsDisabled{ErrorCodeOverride: aws.String("KMS.DisabledException")}), true},
		{op(&smithy.GenericAPIError{Code: "KMS.NotFoundException"}), true},
		{op(&types.KmsNotFound{}), true},
		{op(&types.InvalidAddress{}), true},
		{op(&types.InvalidSecurity{}), true},
		{op(&smithy.GenericAPIError{Code: "AccessDenied"}), true},
		{op(&smithy.GenericAPIError{Code: "AccessDeniedException"}), true},
		{op(&smithy.GenericAPIError{Code: "InvalidClientTokenId"}), true},
		{op(&smithy.GenericAPIError{Code: "ExpiredToken"}), true},
		{op(&types.KmsThrottled{}), false},
		{op(&smithy.GenericAPIError{Code: "KMS.ThrottlingException"}), false},
		{op(&types.OverLimit{}), false},
		{op(&types.RequestThrottled{}), false},
		{op(&smithy.GenericAPIError{Code: "ThrottlingException"}), false},
		{op(&smithy.GenericAPIError{Code: "InternalFailure"}), false},
		{op(&smithy.GenericAPIError{Code: "ServiceUnavailable"}), false},
		{op(errors.New("dial tcp: connection refused")), false},
		{fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: "Throttled", Message: "AccessDenied QueueDoesNotExist"}), false},
		{errors.New("QueueDoesNotExist"), false},
		{nil, false},
	} {
		if got := sqserr.Persistent(tc.err); got != tc.want {
			t.Errorf("Persistent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&types.QueueDoesNotExist{}, "QueueDoesNotExist"},
		{fmt.Errorf("x: %w", &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue"}), "NonExistentQueue"},
		{errors.New("plain"), ""},
		{nil, ""},
	} {
		if got := sqserr.Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
