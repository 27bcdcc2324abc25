package redrive_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

func TestMoveAll(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	want := seq("all", 25, src)
	putDead(t, client, dlq, false, want...)
	r := newRedriver(t, client)
	sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Moved != 25 || sum.Failed != 0 || sum.Skipped != 0 {
		t.Fatalf("summary %+v", sum)
	}
	if n := total(t, client, dlq); n != 0 {
		t.Fatalf("dlq still has %d", n)
	}
	got := bodies(drain(t, client, src))
	var wb []string
	for _, d := range want {
		wb = append(wb, d.body)
	}
	if !slices.Equal(got, wb) {
		t.Fatalf("source got %v, want %v", got, wb)
	}
}
