package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// Scenario: credits of 5 MiB (their bodies in S3, pointers in SQS), three
// workers, a random one SIGKILLed every ~2 s and restarted. Every credit
// is applied once, and no object is lost: the bucket still holds one per
// message sent (nothing deletes them: DeleteAfterAck is off, the default).
func TestLargeCreditsCrashes(t *testing.T) {
	l := newLedgerStore(t, storeDynamoDB)
	l.setMaxReceiveCount(crashMaxReceiveCount)
	s3c := testenv.S3(t)
	bucket := strings.ToLower(l.name) + "-payloads" // the ledger's default
	t.Cleanup(func() {
		ctx := context.Background()
		if out, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)}); err == nil {
			for _, o := range out.Contents {
				_, _ = s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			}
		}
		_, _ = s3c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	})
	var sent sendReport
	out := l.run("send", "-n", fmt.Sprint(size(24, 60)), "-accounts", "20", "-dup-rate", "0.1", "-memo-bytes", fmt.Sprint(5<<20), "-json")
	if err := json.Unmarshal(out, &sent); err != nil {
		t.Fatalf("send report %q: %v", out, err)
	}
	objects := len(testenv.Objects(t, s3c, bucket))
	if objects != sent.Messages {
		t.Fatalf("%d objects for %d messages sent", objects, sent.Messages)
	}
	// Fewer handlers at once (each holds a 5 MiB body), each slowed down
	// so that the kills land on credits in flight.
	args := []string{"-concurrency", "4", "-visibility", "4s", "-wait", "1s", "-log-level", "debug", "-handler-delay", "2s"}
	workers := []*worker{l.startWorker(args...), l.startWorker(args...), l.startWorker(args...)}
	all := append([]*worker(nil), workers...)
	crashes := 0
	deadline := time.Now().Add(5 * time.Minute)
	for !l.status().Drained && time.Now().Before(deadline) {
		time.Sleep(time.Duration(1500+rand.IntN(1000)) * time.Millisecond)
		i := rand.IntN(len(workers))
		workers[i].kill()
		crashes++
		workers[i] = l.startWorker(args...)
		all = append(all, workers[i])
	}
	l.waitDrained(2 * time.Minute)
	copies, _ := l.check(sent)
	redelivered := 0
	for _, s := range settled(t, all...) {
		if s.ReceiveCount > 1 {
			redelivered++
		}
	}
	if left := len(testenv.Objects(t, s3c, bucket)); left != objects {
		t.Errorf("%d objects left of %d: an object was lost", left, objects)
	}
	if crashes < 2 || redelivered == 0 {
		t.Errorf("%d crashes, %d messages settled again after one; want kills that hit credits in flight", crashes, redelivered)
	}
	report(t, "%d credits of 5 MiB through S3 (%d distinct, %d duplicates), %d crashes (SIGKILL), %d messages redelivered after a crash; invariants hold: %v; objects kept: %d of %d; extra DLQ copies: %d",
		sent.Messages, sent.Distinct, sent.Duplicates, crashes, redelivered, !t.Failed(), objects, objects, copies)
}
