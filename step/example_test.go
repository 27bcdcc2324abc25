package step_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/step"
)

// A handler of two steps, "reserve" and "charge", whose worker is killed
// (simulated here by a panic, which leaves the message's record claimed,
// as a killed process does) after the first. Once the dead worker's lease
// has ended, the next delivery takes the record over and resumes after
// the completed step: "reserve" does not run again, its recorded result
// comes back, and only "charge" runs.
func ExampleRun_resume() {
	now := time.Now()
	clock := func() time.Time { return now }
	store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "orders", NowFunc: clock})
	mw, _ := dedupe.New(dedupe.Config{Store: store, Lease: time.Minute, NowFunc: clock})
	killed := false
	handler := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		seat, err := step.Run(ctx, "reserve", step.Options{Policy: step.Park}, func(context.Context) ([]byte, error) {
			fmt.Println("reserving a seat")
			return []byte("seat 12A"), nil
		})
		if err != nil {
			return err
		}
		if !killed {
			killed = true
			panic("worker killed") // nothing after this point runs, nothing is released
		}
		_, err = step.Run(ctx, "charge", step.Options{Policy: step.Rerun}, func(context.Context) ([]byte, error) {
			fmt.Printf("charging for %s\n", seat)
			return []byte("ch_1"), nil
		})
		return err
	})
	p := consumertest.New(consumer.Config{Handler: handler, Middleware: []consumer.Middleware{mw.Wrap}})
	deliver := func() {
		msg := consumertest.NewMessage(`{"order":42}`, consumertest.WithAttribute(consumer.AttrID, "order-42"))
		fmt.Println(p.Process(context.Background(), msg).Outcome)
	}
	deliver()                      // killed after "reserve"
	deliver()                      // the dead worker's lease still holds the record
	now = now.Add(2 * time.Minute) // its lease has ended
	deliver()                      // taken over: resumes after "reserve"
	deliver()                      // a redelivery of a completed message
	// Output:
	// reserving a seat
	// retry
	// retry
	// charging for seat 12A
	// ack
	// duplicate
}

// A charge whose answer is lost (the connection dropped after the bank
// charged): its outcome is unknown, so the message is retried, and the
// retry asks the bank instead of charging again.
func ExampleRun_reconcile() {
	store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "orders"})
	mw, _ := dedupe.New(dedupe.Config{Store: store})
	charged := 0 // the bank's charges of order 42
	handler := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		_, err := step.Run(ctx, "charge", step.Options{
			Policy: step.Reconcile,
			ReconcileFunc: func(context.Context) (step.Reconciliation, error) {
				fmt.Println("GET /charges/order-42:", charged, "charge(s)")
				if charged > 0 {
					return step.Done([]byte("ch_1")), nil
				}
				return step.NotDone(), nil
			},
			Timeout: 10 * time.Second,
		}, func(context.Context) ([]byte, error) {
			charged++
			fmt.Println("POST /charges: charged, then the connection dropped")
			return nil, io.ErrUnexpectedEOF
		})
		return err
	})
	p := consumertest.New(consumer.Config{Handler: handler, Middleware: []consumer.Middleware{mw.Wrap}})
	for range 2 {
		res := p.Process(context.Background(), consumertest.NewMessage(`{"order":42}`, consumertest.WithAttribute(consumer.AttrID, "order-42")))
		fmt.Println(res.Outcome)
	}
	fmt.Println("charged", charged, "time(s)")
	// Output:
	// POST /charges: charged, then the connection dropped
	// retry
	// GET /charges/order-42: 1 charge(s)
	// ack
	// charged 1 time(s)
}
