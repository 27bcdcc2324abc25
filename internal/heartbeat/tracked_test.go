package heartbeat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/internal/heartbeat"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// Every handle a round finds lost stops being tracked before the first of
// their lost callbacks runs, so a callback can tell which other handles
// are gone; handles still kept stay tracked.
func TestTrackedBeforeLostCallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := queueWith(t, 3, 1)
		good := handles[0]
		bad := []string{"bad1", "bad2", "bad3"} // handles the queue never issued
		h := newHBOn(t, f, q, heartbeat.Config{Visibility: 3 * time.Second, Interval: time.Second})
		var mu sync.Mutex
		var problems []string
		calls := 0
		check := func(all []string, keep string) func(error) {
			return func(error) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				for _, o := range all {
					if h.Tracked(o) {
						problems = append(problems, fmt.Sprintf("call %d: %s still tracked", calls, o))
					}
				}
				if keep != "" && !h.Tracked(keep) {
					problems = append(problems, fmt.Sprintf("call %d: %s not tracked", calls, keep))
				}
			}
		}
		h.Add(good, time.Now(), nil)
		for _, b := range bad {
			h.Add(b, time.Now(), check(bad, good))
		}
		time.Sleep(1500 * time.Millisecond)
		h.Tick(context.Background()) // refused: sender at fault
		if calls != len(bad) {
			t.Errorf("%d lost callbacks for refused handles, want %d", calls, len(bad))
		}

		// Every call fails from now on: the kept handles expire in one round.
		h.Remove(good)
		if h.Tracked(good) {
			t.Errorf("%s tracked after Remove", good)
		}
		calls = 0
		gone := []string{"e1", "e2", "e3"}
		for _, e := range gone {
			h.Add(e, time.Now(), check(gone, ""))
		}
		f.Inject(func(string, any) sqsfake.Fault { return sqsfake.Fault{Err: errors.New("network down")} })
		for range 6 {
			time.Sleep(time.Second)
			h.Tick(context.Background())
		}
		if calls != len(gone) {
			t.Errorf("%d lost callbacks for expired handles, want %d", calls, len(gone))
		}
		for _, p := range problems {
			t.Error(p)
		}
	})
}
