package redrive

import (
	"fmt"
	"testing"
	"time"
)

// snsBody is a dead letter of an SNS-fed queue without raw delivery: the
// body is SNS's envelope and the publisher's JSON is the Message string.
func snsBody(inner string) string {
	return fmt.Sprintf(`{"Type":"Notification","MessageId":"0b9a4c52-7f0e-5d2a-9b1e-3c8d0a6f2e41","TopicArn":"arn:aws:sns:us-east-1:123456789012:orders",`+
		`"Message":%q,"Timestamp":"2026-05-02T00:54:06.655Z","SignatureVersion":"1","Signature":"EXAMPLE",`+
		`"SigningCertURL":"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-x.pem"}`, inner)
}

// A json filter on an SNS-fed or EventBridge-fed queue's dead letters
// looks at the publisher's message inside the envelope, as the consumer's
// envelope.Unwrap hands it to the handler; a field of the body itself
// still matches as before.
func TestFilterJSONLooksInsideEnvelopes(t *testing.T) {
	t.Parallel()
	sns := testEntry(snsBody(`{"order_id":"o-42","amount":5,"customer":{"tier":"gold"}}`), "permanent", "x", time.Hour, nil)
	eb := testEntry(`{"version":"0","id":"6a7e8feb-b491-4cf7-a9f1-bf3703467718","detail-type":"Order Placed","source":"shop.orders",`+
		`"time":"2026-05-02T00:54:06Z","detail":{"order_id":"o-7","lines":[{"sku":"A1"}]}}`, "permanent", "x", time.Hour, nil)
	text := testEntry(snsBody("order o-42 placed"), "permanent", "x", time.Hour, nil)
	confirm := testEntry(`{"Type":"SubscriptionConfirmation","MessageId":"m-3","Token":"t","TopicArn":"arn:aws:sns:us-east-1:123456789012:t",`+
		`"Message":"{\"order_id\":\"o-42\"}","SubscribeURL":"https://sns.us-east-1.amazonaws.com/","Timestamp":"2026-11-30T12:00:00Z"}`, "permanent", "x", time.Hour, nil)
	// Not an envelope: a body of the application's own with a Message field.
	own := testEntry(`{"Message":"{\"order_id\":\"o-42\"}"}`, "permanent", "x", time.Hour, nil)
	for _, c := range []struct {
		expr string
		e    Entry
		want bool
	}{
		{"json:order_id=o-42", sns, true},
		{"json:order_id=o-43", sns, false},
		{"json:amount=5", sns, true},
		{"json:customer.tier~^go", sns, true},
		{"json:Type=Notification", sns, true}, // the envelope's own fields still match
		{"json:TopicArn~:orders$", sns, true},
		{"json:order_id=o-7", eb, true},
		{"json:lines.0.sku=A1", eb, true},
		{"json:detail.order_id=o-7", eb, true},
		{"json:source=shop.orders", eb, true},
		{"json:order_id=o-42", text, false}, // the Message is no JSON
		{"json:order_id=o-42", confirm, false},
		{"json:order_id=o-42", own, false},
	} {
		f, err := ParseFilter(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := f.Match(c.e); got != c.want {
			t.Errorf("%s on %.60q…: got %v, want %v", c.expr, c.e.Message.Body, got, c.want)
		}
	}
}
