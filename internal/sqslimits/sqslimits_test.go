package sqslimits

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestSeconds checks the second forms against the durations, which the
// API's documented values are given in.
func TestSeconds(t *testing.T) {
	if MaxVisibilitySeconds != 43200 {
		t.Errorf("MaxVisibilitySeconds = %d, want 43200", MaxVisibilitySeconds)
	}
	if MaxWaitTimeSeconds != 20 {
		t.Errorf("MaxWaitTimeSeconds = %d, want 20", MaxWaitTimeSeconds)
	}
}

// TestMessageSize checks the size SQS counts: body, and each attribute's
// name, data type and value (string or binary).
func TestMessageSize(t *testing.T) {
	attrs := map[string]types.MessageAttributeValue{
		"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")}, // 6+6+4
		"blob":   {DataType: aws.String("Binary.gz"), BinaryValue: []byte{1, 2, 3}}, // 4+9+3
		"n":      {DataType: aws.String("Number"), StringValue: aws.String("12.5")}, // 1+6+4
	}
	if got, want := MessageSize("héllo", attrs), 6+16+16+11; got != want {
		t.Errorf("MessageSize = %d, want %d", got, want)
	}
	if got := MessageSize("", nil); got != 0 {
		t.Errorf("MessageSize of nothing = %d", got)
	}
}
