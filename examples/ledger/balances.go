package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func cmdBalances(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("balances", stderr)
	asJSON := fs.Bool("json", false, `print {"accounts":{"<id>":<int>,...},"total":<int>}`)
	n, c, err := g.open(ctx, fs, args, nil)
	if err != nil {
		return err
	}
	defer c.close()
	var accounts map[string]int64
	var total int64
	if n.Store == storePostgres {
		accounts, total, err = balancesPostgres(ctx, c.pg)
	} else {
		accounts, total, err = balances(ctx, c.ddb, n.Ledger)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			Accounts map[string]int64 `json:"accounts"`
			Total    int64            `json:"total"`
		}{accounts, total})
	}
	ids := make([]string, 0, len(accounts))
	for id := range accounts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(stdout, "%-20s %15d\n", id, accounts[id])
	}
	fmt.Fprintf(stdout, "%-20s %15d\n", "total", total)
	return nil
}

// balances reads every account of the ledger table.
func balances(ctx context.Context, client *dynamodb.Client, table string) (map[string]int64, int64, error) {
	accounts := map[string]int64{}
	var total int64
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("scan %s: %w (run `ledger setup` first)", table, err)
		}
		for _, item := range page.Items {
			id, _ := item["account"].(*ddbtypes.AttributeValueMemberS)
			bal, _ := item["balance"].(*ddbtypes.AttributeValueMemberN)
			if id == nil || bal == nil {
				continue
			}
			v, err := strconv.ParseInt(bal.Value, 10, 64)
			if err != nil {
				return nil, 0, fmt.Errorf("account %s: balance %q: %w", id.Value, bal.Value, err)
			}
			accounts[id.Value] = v
			total += v
		}
	}
	return accounts, total, nil
}

// queueStatus is what `ledger status -json` prints.
type queueStatus struct {
	Visible      int  `json:"visible"`
	InFlight     int  `json:"in_flight"`
	Delayed      int  `json:"delayed"`
	DLQVisible   int  `json:"dlq_visible"`
	DLQInFlight  int  `json:"dlq_in_flight"`
	QueueDrained bool `json:"queue_drained"`
}

func cmdStatus(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("status", stderr)
	asJSON := fs.Bool("json", false, "print the counts as JSON")
	n, c, err := g.open(ctx, fs, args, nil)
	if err != nil {
		return err
	}
	defer c.close()
	if n.Store == storePostgres {
		// The counts are the queues'; the ledger's tables must exist all
		// the same, as `status` on DynamoDB needs its queues.
		if err := checkPostgres(ctx, c.pg, n.Schema); err != nil {
			return err
		}
	}
	var st queueStatus
	for _, q := range []struct {
		name   string
		counts []*int
		attrs  []sqstypes.QueueAttributeName
	}{
		{n.Queue, []*int{&st.Visible, &st.InFlight, &st.Delayed}, []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		}},
		{n.DLQ, []*int{&st.DLQVisible, &st.DLQInFlight}, []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		}},
	} {
		url, err := c.queueURL(ctx, q.name)
		if err != nil {
			return err
		}
		counts, err := queueCounts(ctx, c.sqs, url, q.attrs...)
		if err != nil {
			return fmt.Errorf("queue %s: %w", q.name, err)
		}
		for i, v := range counts {
			*q.counts[i] = v
		}
	}
	st.QueueDrained = st.Visible == 0 && st.InFlight == 0 && st.Delayed == 0
	if *asJSON {
		return json.NewEncoder(stdout).Encode(st)
	}
	fmt.Fprintf(stdout, "%s: %d visible, %d in flight, %d delayed; %s: %d visible, %d in flight\n",
		n.Queue, st.Visible, st.InFlight, st.Delayed, n.DLQ, st.DLQVisible, st.DLQInFlight)
	return nil
}

// queueAttributesAPI is the SQS call queueCounts makes.
type queueAttributesAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// queueCounts reads count attributes of a queue, in the order given. An
// attribute missing from the answer, or one that is not a non-negative
// integer, is an error, never 0: "drained" must mean the queue said so.
func queueCounts(ctx context.Context, client queueAttributesAPI, url string, names ...sqstypes.QueueAttributeName) ([]int, error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: names})
	if err != nil {
		return nil, fmt.Errorf("attributes: %w", err)
	}
	counts := make([]int, len(names))
	for i, name := range names {
		v, ok := out.Attributes[string(name)]
		if !ok {
			return nil, fmt.Errorf("attribute %s missing from the answer", name)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("attribute %s=%q is not a count", name, v)
		}
		counts[i] = n
	}
	return counts, nil
}
