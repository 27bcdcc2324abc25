package main

import "testing"

// TestUnknownCounts checks that a queue count SQS returned as something
// other than a number (-1) is shown as unknown, not as 0 or -1.
func TestUnknownCounts(t *testing.T) {
	t.Parallel()
	if got := countText(-1); got != "?" {
		t.Errorf("countText(-1) = %q, want ?", got)
	}
	if got := countText(7); got != "7" {
		t.Errorf("countText(7) = %q", got)
	}
	for _, c := range []struct {
		n, max int
		want   string
	}{
		{5, 0, "up to 5"}, {5, 3, "up to 3"}, {-1, 0, "all the"}, {-1, 4, "up to 4"},
	} {
		if got := upTo(c.n, c.max); got != c.want {
			t.Errorf("upTo(%d, %d) = %q, want %q", c.n, c.max, got, c.want)
		}
	}
}
