package outboxpg_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
	"github.com/sqsonce/sqsonce/producer"
)

// sent is a producer.SQSAPI that accepts everything and hands each
// message's body over a channel.
type sent chan string

func (s sent) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		s <- aws.ToString(e.MessageBody)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: e.Id})
	}
	return out, nil
}

// GetQueueAttributes answers SQS's default MaximumMessageSize.
func (s sent) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"MaximumMessageSize": "1048576"}}, nil
}

var _ producer.SQSAPI = sent(nil)

// listenerPID returns the backend of the connection listening on channel,
// other than not, waiting for it to appear.
func listenerPID(t *testing.T, pool *pgxpool.Pool, channel string, not uint32) uint32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pid uint32
		err := pool.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity WHERE query = $1 AND pid <> $2 LIMIT 1`,
			`LISTEN "`+channel+`"`, int32(not)).Scan(&pid)
		if err == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection LISTENs on %s: %v", channel, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A relay whose poll interval is a minute publishes a committed event well
// before its next poll, because the commit's NOTIFY wakes it. When the
// listener's connection is killed, the relay falls back to polling, the
// listener reconnects, and NOTIFY wakes the relay again.
func TestRelayWakesOnNotify(t *testing.T) {
	t.Parallel()
	const poll = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := newPool(t)
	channel := "outbox_wake_" + testenv.Name("c")[2:]
	st := newStore(t, pool, outboxpg.Config{Channel: channel})
	l := st.Listener(pool)
	defer l.Close(context.Background()) //nolint:errcheck
	got := make(sent, 10)
	core, logs := observer.New(zapcore.WarnLevel)
	r, err := outbox.NewRelay(outbox.RelayConfig{
		Store: st, Client: got, QueueURL: "https://sqs.example/q", PollInterval: poll, WaitFunc: l.Wait, Logger: zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = r.Run(ctx) })

	published := func(payload string) {
		t.Helper()
		start := time.Now()
		if err := commit(ctx, pool, st, outbox.Event{Entity: "a", Payload: payload}); err != nil {
			t.Fatal(err)
		}
		select {
		case body := <-got:
			if body != payload {
				t.Fatalf("published %q, want %q", body, payload)
			}
		case <-time.After(poll):
			t.Fatalf("%s not published within the poll interval (%v): no wake-up", payload, poll)
		}
		if waited := time.Since(start); waited >= poll {
			t.Fatalf("%s published after %v, as a poll would", payload, waited)
		}
	}
	pid := listenerPID(t, pool, channel, 0)
	published("first")

	testenv.PostgresTerminate(t, pid)
	published("after the kill") // by a fallback poll, or once the listener is back
	newPID := listenerPID(t, pool, channel, pid)
	if len(logs.FilterMessage("outbox: relay wait failed: polling until it works again").All()) == 0 {
		t.Fatalf("the relay did not notice its listener's connection end; logs: %v", logs.All())
	}
	published("after the reconnect")
	if again := listenerPID(t, pool, channel, pid); again != newPID {
		t.Fatalf("listener backend %d, then %d: want one reconnection", newPID, again)
	}
}
