package redrive_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

// A producer can write any source_queue into sqsonce-failure (SQS's own
// maxReceiveCount move keeps the producer's attributes). Without --to, a
// move sends only to a queue whose RedrivePolicy names the DLQ; anything
// else is refused, left in the DLQ and counted.
func TestMoveRefusesForgedDestination(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	ctx := context.Background()
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	// victim is a real queue of the same account, but not a source of dlq.
	victim, victimArn := testenv.Queue(t, client, testenv.Prefix(t)+"-victim", testenv.QueueOptions{})
	srcArn := resolve(t, newRedriver(t, client), src).ARN
	otherRegion := "arn:aws:sqs:eu-west-3:" + accountOf(srcArn) + ":" + nameOfURL(src)
	otherAccount := "arn:aws:sqs:" + regionOf(srcArn) + ":999999999999:" + nameOfURL(src)
	putDead(t, client, dlq, false,
		dead{body: "legit", class: "permanent", source: src},
		dead{body: "by-url", class: "permanent", source: victim},
		dead{body: "by-arn", class: "permanent", source: victimArn},
		dead{body: "by-name", class: "permanent", source: nameOfURL(victim)},
		dead{body: "other-region", class: "permanent", source: otherRegion},
		dead{body: "other-account", class: "permanent", source: otherAccount},
	)
	r := newRedriver(t, client)
	sum, err := r.Move(ctx, resolve(t, r, dlq), redrive.MoveOptions{})
	if err != nil {
		t.Fatalf("move: %v (%+v)", err, sum)
	}
	if got := bodies(drain(t, client, victim)); len(got) != 0 {
		t.Fatalf("a forged source_queue steered messages to a queue that does not feed the DLQ: %v", got)
	}
	if got := bodies(drain(t, client, src)); !slices.Equal(got, []string{"legit"}) {
		t.Fatalf("source got %v", got)
	}
	if sum.Moved != 1 || sum.Refused != 5 || sum.Failed != 0 {
		t.Fatalf("summary %+v", sum)
	}
	left := bodies(drain(t, client, dlq))
	if want := []string{"by-arn", "by-name", "by-url", "other-account", "other-region"}; !slices.Equal(left, want) {
		t.Fatalf("dlq kept %v, want %v", left, want)
	}
	// A dry run counts the same refusals and moves nothing.
	putDead(t, client, dlq, false, dead{body: "dry", class: "permanent", source: victim})
	sum, err = r.Plan(ctx, resolve(t, r, dlq), redrive.MoveOptions{})
	if err != nil || sum.Refused != 1 || sum.Matched != 0 {
		t.Fatalf("dry run %+v %v", sum, err)
	}
	// Named explicitly, any queue of the right kind is a destination.
	sum, err = r.Move(ctx, resolve(t, r, dlq), redrive.MoveOptions{To: victim})
	if err != nil || sum.Moved != 1 || sum.Refused != 0 {
		t.Fatalf("explicit --to %+v %v", sum, err)
	}
}

// A forged sqsonce-redrive whose redriven_at lies in the future must not
// pin a message (or, on FIFO, its whole group) in the DLQ.
func TestForgedRedriveHistoryDoesNotPin(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	for _, fifo := range []bool{false, true} {
		src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: fifo})
		h, _ := json.Marshal(redrive.History{Count: 1, RedrivenAt: time.Now().Add(100 * 365 * 24 * time.Hour), DLQ: nameOfURL(dlq)})
		forged := map[string]types.MessageAttributeValue{redrive.AttrRedrive: {DataType: aws.String("String"), StringValue: aws.String(string(h))}}
		putDead(t, client, dlq, fifo,
			dead{body: "forged", class: "permanent", source: src, attrs: forged, group: "g"},
			dead{body: "after", class: "permanent", source: src, group: "g"},
		)
		r := newRedriver(t, client)
		sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{})
		if err != nil || sum.Moved != 2 {
			t.Fatalf("fifo=%v: %+v %v", fifo, sum, err)
		}
		if got := bodies(drain(t, client, src)); !slices.Equal(got, []string{"after", "forged"}) {
			t.Fatalf("fifo=%v: source got %v", fifo, got)
		}
	}
}

func nameOfURL(u string) string { return u[lastSlash(u)+1:] }

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

// arnPart returns field i of an ARN (3 region, 4 account).
func arnPart(arn string, i int) string {
	parts := []string{}
	start := 0
	for j := 0; j < len(arn); j++ {
		if arn[j] == ':' {
			parts = append(parts, arn[start:j])
			start = j + 1
		}
	}
	parts = append(parts, arn[start:])
	if i < len(parts) {
		return parts[i]
	}
	return ""
}

func regionOf(arn string) string  { return arnPart(arn, 3) }
func accountOf(arn string) string { return arnPart(arn, 4) }

// emptyIDs reports a failed entry with an empty Id in every
// DeleteMessageBatch response (a malformed response must not crash a move).
type emptyIDs struct{ redrive.SQSAPI }

func (e emptyIDs) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	out, err := e.SQSAPI.DeleteMessageBatch(ctx, in, o...)
	if err == nil {
		out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: aws.String(""), Code: aws.String("InternalError"), SenderFault: false})
	}
	return out, err
}

func TestDeleteResponseWithEmptyID(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, false, seq("empty-id", 3, src)...)
	r := newRedriver(t, emptyIDs{client})
	sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{})
	if err != nil || sum.Moved != 3 || sum.DeleteFailed != 0 {
		t.Fatalf("%+v %v", sum, err)
	}
	if n := total(t, client, src); n != 3 {
		t.Fatalf("source has %d", n)
	}
}
