package settle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/settle"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// A dead letter sent with a signing key carries a failure record that
// verifies for its body, even when the reason was cut to fit the DLQ's
// MaximumMessageSize after signing; without a key it carries none.
func TestSendSignsTheFailure(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("s", 32))
	f := sqsfake.New()
	dlq := f.AddQueue("dlq", map[string]string{"MaximumMessageSize": "1024"})
	body := strings.Repeat("b", 600)
	for _, k := range [][]byte{key, nil} {
		err := settle.Send(context.Background(), f, zap.NewNop(), "test", settle.Letter{
			Msg:    settle.Message{ID: "m-1", Body: body, ReceiveCount: 2},
			Reason: strings.Repeat("r", 2000), SourceQueue: "https://sqs.us-east-1.amazonaws.com/123456789012/q",
			DLQ: dlq, MaxSize: 1024, Now: time.Now(), SigningKey: k,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sent := f.Sent(dlq)
	if len(sent) != 2 {
		t.Fatalf("%d dead letters, want 2", len(sent))
	}
	signed, _ := deadletter.ParseFailure(sent[0].Attributes)
	if len(signed.Error) > 300 || !signed.Verify(key, body) {
		t.Fatalf("signed record %+v: want its reason cut and the record verifying", signed)
	}
	unsigned, _ := deadletter.ParseFailure(sent[1].Attributes)
	if unsigned.Signature != "" || unsigned.Verify(key, body) {
		t.Fatalf("unsigned record %+v verifies", unsigned)
	}
}
