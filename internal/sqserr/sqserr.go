// Package sqserr classifies SQS errors by type and error code, the way
// every sqsonce package needs them, never by message text.
package sqserr

import (
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// QueueMissing reports whether err says the queue does not exist: the
// typed QueueDoesNotExist of the JSON protocol, or the codes older
// endpoints and emulators send.
func QueueMissing(err error) bool {
	var qne *types.QueueDoesNotExist
	if errors.As(err, &qne) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "NonExistentQueue":
			return true
		}
	}
	return false
}

// MessageRefused reports whether err says SQS refused a message itself
// (too large for the queue's MaximumMessageSize, invalid characters, bad
// attributes): sending the same message again fails again. SQS reports a
// message over the size limit as InvalidParameterValue.
func MessageRefused(err error) bool {
	var contents *types.InvalidMessageContents
	var attrName *types.InvalidAttributeName
	var attrValue *types.InvalidAttributeValue
	if errors.As(err, &contents) || errors.As(err, &attrName) || errors.As(err, &attrValue) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch strings.TrimPrefix(ae.ErrorCode(), "AWS.SimpleQueueService.") {
		case "InvalidParameterValue", "InvalidMessageContents", "InvalidAttributeName", "InvalidAttributeValue":
			return true
		}
	}
	return false
}
