package settle_test

import (
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/internal/settle"
)

func TestParseARN(t *testing.T) {
	t.Parallel()
	a, err := settle.ParseARN("arn:aws-cn:sqs:cn-north-1:123456789012:jobs.fifo")
	if err != nil || a.Partition != "aws-cn" || a.Region != "cn-north-1" || a.Account != "123456789012" || a.Name != "jobs.fifo" || !a.FIFO() {
		t.Errorf("ParseARN = %+v, %v", a, err)
	}
	if a.String() != "arn:aws-cn:sqs:cn-north-1:123456789012:jobs.fifo" {
		t.Errorf("String = %s", a)
	}
	for _, bad := range []string{"", "arn:aws:sns:us-east-1:1:topic", "arn:aws:sqs:us-east-1:1:", "https://sqs/1/q"} {
		if _, err := settle.ParseARN(bad); err == nil {
			t.Errorf("ParseARN(%q) succeeded", bad)
		}
	}
}

// FuzzParseARN: any string either fails to parse or parses into an ARN
// that prints back as the same string and parses again to the same ARN.
func FuzzParseARN(f *testing.F) {
	for _, s := range []string{
		"arn:aws:sqs:us-east-1:123456789012:orders",
		"arn:aws:sqs:eu-west-1:123456789012:orders.fifo",
		"arn:aws-cn:sqs:cn-north-1:123456789012:q",
		"arn:aws-us-gov:sqs:us-gov-west-1:123456789012:dlq-1_a",
		"arn:aws:sqs:us-east-1:000000000000:name:with:colons",
		"arn:aws:sns:us-east-1:123456789012:topic",
		"arn:aws:sqs:us-east-1:123456789012:",
		"arn:aws:sqs:us-east-1",
		"https://sqs.us-east-1.amazonaws.com/123456789012/orders",
		"",
		"arn::sqs:::q",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := settle.ParseARN(s)
		if err != nil {
			if !strings.Contains(err.Error(), "is not an SQS queue ARN") {
				t.Fatalf("error %q does not say what is wrong", err)
			}
			return
		}
		if a.Name == "" || strings.Contains(a.Partition, ":") || strings.Contains(a.Region, ":") || strings.Contains(a.Account, ":") {
			t.Fatalf("ParseARN(%q) = %+v", s, a)
		}
		if a.String() != s {
			t.Fatalf("ParseARN(%q).String() = %q", s, a.String())
		}
		if b, err := settle.ParseARN(a.String()); err != nil || b != a {
			t.Fatalf("ParseARN(%q) = %+v, %v; want %+v", a.String(), b, err, a)
		}
		if a.FIFO() != strings.HasSuffix(s, ".fifo") {
			t.Fatalf("ParseARN(%q).FIFO() = %v", s, a.FIFO())
		}
	})
}

// FuzzARNRoundTrip: an ARN built from parts without ':' (the name may hold
// any) and a non-empty name prints and parses back to the same parts.
func FuzzARNRoundTrip(f *testing.F) {
	f.Add("aws", "us-east-1", "123456789012", "orders.fifo")
	f.Add("aws", "", "", "q:r")
	f.Fuzz(func(t *testing.T, partition, region, account, name string) {
		if name == "" || strings.Contains(partition+region+account, ":") {
			return
		}
		a := settle.ARN{Partition: partition, Region: region, Account: account, Name: name}
		b, err := settle.ParseARN(a.String())
		if err != nil || b != a {
			t.Fatalf("ParseARN(%q) = %+v, %v; want %+v", a.String(), b, err, a)
		}
	})
}
