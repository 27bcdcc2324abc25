package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idemtest"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	idemtest.Run(t, func(t *testing.T, now func() time.Time) idempotency.Store {
		return idempotency.NewMemory(idempotency.MemoryConfig{NowFunc: now})
	})
}

// TestMemoryRefusesWrites: the memory store cannot commit DynamoDB writes,
// so it must not complete the record without them.
func TestMemoryRefusesWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := idempotency.NewMemory(idempotency.MemoryConfig{})
	c, err := s.Claim(ctx, "k", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Complete(ctx, "k", c.Token, idempotency.Completion{Writes: []types.TransactWriteItem{{}}})
	if !errors.Is(err, idempotency.ErrWritesUnsupported) {
		t.Fatalf("Complete with writes: %v, want ErrWritesUnsupported", err)
	}
	if got, _ := s.Claim(ctx, "k", "fp", time.Minute); got.Status != idempotency.InProgress {
		t.Fatalf("after a refused Complete: %s, want in_progress", got.Status)
	}
}
