package outboxpg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listener wakes a relay as soon as an event commits: [Store.Put] sends a
// NOTIFY on the store's channel, delivered when the writer's transaction
// commits, and the Listener LISTENs on a connection of its own. Polling
// stays the fallback: Wait returns after at most its timeout, and after an
// error (the relay then polls until the next Wait reconnects).
type Listener struct {
	pool    *pgxpool.Pool
	channel string

	mu   sync.Mutex
	conn *pgx.Conn
}

// Listener returns a Listener on the store's channel. It connects on the
// first Wait, taking one connection out of pool for good (until Close).
// Give each relay its own: Waits on one Listener run one at a time.
func (st *Store) Listener(pool *pgxpool.Pool) *Listener {
	return &Listener{pool: pool, channel: st.cfg.Channel}
}

// Wait blocks until an event commits, d passes, or ctx ends, and reports
// whether the caller should poll now: woken by a commit, or just
// (re)connected. Notifications that arrived since the last Wait wake it
// at once, so a commit between a relay's poll and its Wait is not missed
// once the Listener is connected; and the Wait that connects returns at
// once, woken, because commits before its LISTEN were not heard. After an
// error the connection is closed and the next Wait reconnects.
//
// It is an outbox.RelayConfig.WaitFunc:
//
//	l := store.Listener(pool)
//	defer l.Close(ctx)
//	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: store, WaitFunc: l.Wait, PollInterval: time.Minute, ...})
func (l *Listener) Wait(ctx context.Context, d time.Duration) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil || l.conn.IsClosed() {
		c, err := l.pool.Acquire(ctx)
		if err != nil {
			return false, fmt.Errorf("outboxpg: listen: %w", err)
		}
		conn := c.Hijack()
		channel, err := l.resolve(ctx, conn)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
		}
		if err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			return false, fmt.Errorf("outboxpg: listen: %w", err)
		}
		l.conn = conn
		return true, nil
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	n, err := l.conn.WaitForNotification(wctx)
	switch {
	case n != nil:
		return true, nil
	case err == nil:
		return false, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		// A timeout, not a failure. pgx closes a connection whose wait
		// was cut short mid-message; the next Wait reconnects then.
		return false, nil
	case ctx.Err() != nil:
		return false, context.Cause(ctx)
	}
	_ = l.conn.Close(context.WithoutCancel(ctx))
	l.conn = nil
	return false, fmt.Errorf("outboxpg: wait for events: %w", err)
}

// resolve returns the channel: the configured one, or the events table's
// own as conn's search_path finds it (as Put's NOTIFY does).
func (l *Listener) resolve(ctx context.Context, conn *pgx.Conn) (string, error) {
	if l.channel != "" {
		return l.channel, nil
	}
	var channel *string
	if err := conn.QueryRow(ctx, channelSQL).Scan(&channel); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	if channel == nil {
		return "", errors.New("table " + tableEvents + " not found in the connection's search_path (run Migrate, or set the search_path)")
	}
	return *channel, nil
}

// Close closes the Listener's connection.
func (l *Listener) Close(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil
	}
	err := l.conn.Close(ctx)
	l.conn = nil
	return err
}
