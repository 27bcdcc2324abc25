// Package orders is the handler that examples/worker and examples/lambda
// share: one sqsonce Handler serves a long-running worker and a Lambda
// function unchanged.
package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/consumer"
)

// Order is the examples' message body.
type Order struct {
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount"`
}

// Handler handles one order: a body that is not an order is a permanent
// failure (dead-lettered with its reason); the work itself is left to the
// reader.
func Handler(logger *zap.Logger) consumer.HandlerFunc {
	return func(_ context.Context, m *consumer.Message) error {
		var o Order
		if err := json.Unmarshal([]byte(m.Body), &o); err != nil {
			return consumer.Permanent(fmt.Errorf("not an order: %w", err))
		}
		if o.OrderID == "" {
			return consumer.Permanent(errors.New("not an order: order_id is missing"))
		}
		// Ship the order here; return an error to retry with backoff.
		logger.Debug("order handled", zap.String("message_id", m.ID), zap.String("order_id", o.OrderID))
		return nil
	}
}
