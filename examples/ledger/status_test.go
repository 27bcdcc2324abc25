package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeSQS answers GetQueueUrl and GetQueueAttributes (the SQS JSON
// protocol) with the attributes attrs returns for a queue name.
func fakeSQS(t *testing.T, attrs func(queue string) map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in struct{ QueueName, QueueUrl string }
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		var out any
		switch r.Header.Get("X-Amz-Target") {
		case "AmazonSQS.GetQueueUrl":
			out = map[string]string{"QueueUrl": "http://" + r.Host + "/000000000000/" + in.QueueName}
		case "AmazonSQS.GetQueueAttributes":
			out = map[string]any{"Attributes": attrs(in.QueueUrl[strings.LastIndex(in.QueueUrl, "/")+1:])}
		default:
			http.Error(w, "unexpected call "+r.Header.Get("X-Amz-Target"), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestStatusRefusesMissingCounts: a count the queue's answer lacks or that
// is not a number makes `ledger status` fail; it never reads as 0, which
// would report a queue drained without checking.
func TestStatusRefusesMissingCounts(t *testing.T) {
	full := map[string]string{
		"ApproximateNumberOfMessages":           "0",
		"ApproximateNumberOfMessagesNotVisible": "0",
		"ApproximateNumberOfMessagesDelayed":    "0",
	}
	without := func(name string) map[string]string {
		m := map[string]string{}
		for k, v := range full {
			if k != name {
				m[k] = v
			}
		}
		return m
	}
	with := func(name, value string) map[string]string {
		m := without(name)
		m[name] = value
		return m
	}
	for _, tc := range []struct {
		name       string
		queue, dlq map[string]string
		want       string // in stderr; "" means exit 0
	}{
		{"every count", full, full, ""},
		{"no attributes", map[string]string{}, full, "ApproximateNumberOfMessages missing"},
		{"no in-flight count", without("ApproximateNumberOfMessagesNotVisible"), full, "ApproximateNumberOfMessagesNotVisible missing"},
		{"no delayed count", without("ApproximateNumberOfMessagesDelayed"), full, "ApproximateNumberOfMessagesDelayed missing"},
		{"not a number", with("ApproximateNumberOfMessages", "lots"), full, `ApproximateNumberOfMessages="lots" is not a count`},
		{"negative", with("ApproximateNumberOfMessagesNotVisible", "-2"), full, `"-2" is not a count`},
		{"DLQ without counts", full, map[string]string{}, "queue st-dlq: attribute ApproximateNumberOfMessages missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeSQS(t, func(queue string) map[string]string {
				if queue == "st-dlq" {
					return tc.dlq
				}
				return tc.queue
			})
			t.Setenv("AWS_ENDPOINT_URL_SQS", srv.URL)
			t.Setenv("AWS_REGION", "us-east-1")
			t.Setenv("AWS_ACCESS_KEY_ID", "test")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"-queue", "st", "status", "-json"}, &stdout, &stderr)
			if tc.want == "" {
				var st queueStatus
				if code != 0 || json.Unmarshal(stdout.Bytes(), &st) != nil || !st.QueueDrained {
					t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and a drained queue", code, stdout.String(), stderr.String())
				}
				return
			}
			if code != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout.String(), stderr.String(), tc.want)
			}
		})
	}
}
