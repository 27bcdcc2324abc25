package main

import (
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// When the filters match none of the messages of a DLQ that has some,
// the command says so on stderr, lists what is there (the classes with
// their counts; for bodies, whether they are envelopes and their field
// names, inside the envelope too), and exits 3; nothing was changed.
func TestNothingMatchedSaysWhatIsThere(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putEnveloped(t, client, dlq, src, "o-1", "o-2", "o-3")
	putDead(t, client, dlq, src, 1, "max_attempts")
	for _, c := range []struct {
		args []string
		want []string // on stderr
	}{
		{[]string{"move", dlq, "--class", "panic", "--yes"},
			[]string{"no message matched class=panic", "4 message(s) looked at", "classes: max_attempts=1 permanent=3"}},
		{[]string{"move", dlq, "--class", "panic", "--dry-run", "--json"},
			[]string{"no message matched class=panic", "classes: max_attempts=1 permanent=3"}},
		{[]string{"peek", dlq, "--json-field", "orderId=o-1"},
			[]string{"no message matched json:orderId=o-1", "bodies: json=1 sns=3",
				"fields: Message=3 MessageId=3", "n=1", "inside envelopes: amount=3 order_id=3"}},
		{[]string{"export", dlq, "-", "--filter", "error~timeout"},
			[]string{"no message matched error~timeout", "classes: max_attempts=1 permanent=3"}},
	} {
		code, out, errOut := cli(t, c.args...)
		if code != 3 {
			t.Errorf("%v: exit %d, want 3\nstdout:\n%sstderr:\n%s", c.args, code, out, errOut)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, errOut)
			}
		}
	}
	if n := count(t, client, dlq); n != 4 || count(t, client, src) != 0 {
		t.Fatalf("dlq holds %d, want 4 and nothing moved", n)
	}
	// An empty DLQ matches nothing with nothing to show: exit 0.
	_, empty := testenv.QueueWithDLQ(t, client, testenv.Prefix(t)+"-e", testenv.QueueOptions{})
	if code, out, errOut := cli(t, "move", empty, "--class", "panic", "--yes"); code != 0 || strings.Contains(errOut, "no message matched") {
		t.Fatalf("empty DLQ: exit %d\n%s%s", code, out, errOut)
	}
}
