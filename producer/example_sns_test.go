package producer_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sqsonce/sqsonce/producer"
)

// printingSNS stands in for *sns.Client: it prints what each Publish
// carries, as SNS would deliver it, with a new MessageId every time.
type printingSNS struct {
	producer.SNSAPI // PublishBatch is not called here
	n               int
}

func (c *printingSNS) GetTopicAttributes(context.Context, *sns.GetTopicAttributesInput, ...func(*sns.Options)) (*sns.GetTopicAttributesOutput, error) {
	return &sns.GetTopicAttributesOutput{Attributes: map[string]string{}}, nil
}

func (c *printingSNS) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	c.n++
	fmt.Printf("MessageId sns-%d, sqsonce-id %s\n", c.n, aws.ToString(in.MessageAttributes[producer.AttrID].StringValue))
	return &sns.PublishOutput{MessageId: aws.String(fmt.Sprintf("sns-%d", c.n))}, nil
}

// A job published twice (the second time after a timeout that hid the
// first call's success) is two publications with two MessageIds, but one
// sqsonce-id: the key a consumer dedupes on.
func ExamplePublisher_Publish() {
	pub, err := producer.NewPublisher(producer.PublisherConfig{
		Client:   &printingSNS{},
		TopicARN: "arn:aws:sns:us-east-1:123456789012:orders",
	})
	if err != nil {
		panic(err)
	}
	job := producer.Publication{ID: "order-o-1", Body: `{"order_id":"o-1"}`}
	for range 2 {
		if _, err := pub.Publish(context.Background(), job); err != nil {
			panic(err)
		}
	}
	// Output:
	// MessageId sns-1, sqsonce-id order-o-1
	// MessageId sns-2, sqsonce-id order-o-1
}
