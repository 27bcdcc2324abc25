package sqserr

import (
	"errors"
	"strings"

	"github.com/aws/smithy-go"
)

// Persistent reports whether err is an SQS error that retrying the same
// call cannot heal: it waits for a person to create the queue, grant the
// rights, enable or restore the KMS key, or fix the credentials or the
// endpoint. These are the errors SQS documents for ReceiveMessage (and the
// errors common to every AWS API) that name such a cause, by code:
//
//   - the queue does not exist (QueueDoesNotExist, NonExistentQueue);
//   - the request cannot reach it as addressed (InvalidAddress,
//     InvalidSecurity, UnsupportedOperation);
//   - the caller may not (AccessDenied, AccessDeniedException,
//     NotAuthorized, OptInRequired) or is not who it claims
//     (InvalidClientTokenId, UnrecognizedClientException,
//     SignatureDoesNotMatch, IncompleteSignature,
//     MissingAuthenticationToken, ExpiredToken);
//   - the queue's KMS key cannot be used (KmsAccessDenied, KmsDisabled,
//     KmsInvalidKeyUsage, KmsInvalidState, KmsNotFound, KmsOptInRequired,
//     and their KMS.* forms), but not KMS throttling.
//
// Throttling (OverLimit, RequestThrottled, KmsThrottled), server errors
// and network errors are not persistent: they heal by themselves.
func Persistent(err error) bool {
	code := Code(err)
	switch code {
	case "QueueDoesNotExist", "NonExistentQueue",
		"InvalidAddress", "InvalidSecurity", "UnsupportedOperation",
		"AccessDenied", "AccessDeniedException", "NotAuthorized", "OptInRequired",
		"InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch",
		"IncompleteSignature", "MissingAuthenticationToken", "ExpiredToken", "ExpiredTokenException",
		"KmsAccessDenied", "KmsDisabled", "KmsInvalidKeyUsage", "KmsInvalidState", "KmsNotFound", "KmsOptInRequired":
		return true
	}
	// The query-protocol forms of the KMS errors: KMS.AccessDeniedException,
	// KMS.DisabledException, KMS.NotFoundException, ...
	return strings.HasPrefix(code, "KMS.") && code != "KMS.ThrottlingException"
}

// Code returns the error code of the SQS API error in err's chain, without
// the "AWS.SimpleQueueService." prefix of the query protocol's codes; ""
// when err holds no API error.
func Code(err error) string {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return ""
	}
	return strings.TrimPrefix(ae.ErrorCode(), "AWS.SimpleQueueService.")
}
