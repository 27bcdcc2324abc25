package testenv

import (
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
)

// SNSEndpoint returns the stack's SNS endpoint: AWS_ENDPOINT_URL_SNS when
// it is set (and reachable), else AWS_ENDPOINT_URL_SQS, because fauxqs
// serves SQS and SNS on one port (it tells them apart by protocol: SQS's
// JSON, SNS's query form). The test fails or skips as [Config] does.
func SNSEndpoint(t testing.TB) string {
	t.Helper()
	Config(t) // the SQS and DynamoDB variables first, as every client needs them
	if os.Getenv("AWS_ENDPOINT_URL_SNS") != "" {
		return need(t, "AWS_ENDPOINT_URL_SNS")
	}
	return need(t, "AWS_ENDPOINT_URL_SQS")
}

// SNS returns a client for the stack's SNS endpoint (see [SNSEndpoint]).
// Without AWS_ENDPOINT_URL_SNS the SDK would otherwise send SNS calls to
// AWS itself, so the endpoint is set on the client explicitly.
func SNS(t testing.TB) *sns.Client {
	t.Helper()
	endpoint := SNSEndpoint(t)
	return sns.NewFromConfig(Config(t), func(o *sns.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// TopicOptions shapes a test topic.
type TopicOptions struct {
	// FIFO makes a FIFO topic (its name ends in ".fifo").
	FIFO bool
	// Attributes are extra topic attributes.
	Attributes map[string]string
}

// Topic creates a uniquely named topic, deleted when the test ends, and
// returns its ARN.
func Topic(t testing.TB, client *sns.Client, prefix string, opts TopicOptions) string {
	t.Helper()
	name := Name(prefix)
	attrs := map[string]string{}
	for k, v := range opts.Attributes {
		attrs[k] = v
	}
	if opts.FIFO {
		name += ".fifo"
		attrs["FifoTopic"] = "true"
	}
	out, err := client.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: out.TopicArn})
	})
	return aws.ToString(out.TopicArn)
}

// Subscribe subscribes the queue of ARN queueARN to the topic, with raw
// message delivery when raw is set (the body and message attributes as
// published) and else in SNS's JSON envelope, and removes the
// subscription when the test ends. (On AWS the queue's policy must also
// let the topic send; fauxqs checks no policy.)
func Subscribe(t testing.TB, client *sns.Client, topicARN, queueARN string, raw bool) {
	t.Helper()
	attrs := map[string]string{}
	if raw {
		attrs["RawMessageDelivery"] = "true"
	}
	out, err := client.Subscribe(context.Background(), &sns.SubscribeInput{
		TopicArn:              aws.String(topicARN),
		Protocol:              aws.String("sqs"),
		Endpoint:              aws.String(queueARN),
		Attributes:            attrs,
		ReturnSubscriptionArn: true,
	})
	if err != nil {
		t.Fatalf("subscribe %s to %s: %v", queueARN, topicARN, err)
	}
	t.Cleanup(func() {
		_, _ = client.Unsubscribe(context.Background(), &sns.UnsubscribeInput{SubscriptionArn: out.SubscriptionArn})
	})
}
