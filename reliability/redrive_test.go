package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// redriveCmd is an sqs-redrive process with the ledger's environment.
func redriveCmd(l *ledger, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, "sqs-redrive"), args...)
	cmd.Env = l.env
	return cmd
}

// dlqCredits fills the ledger's DLQ with dead letters as the consumer
// writes them: every credit already applied (read back from the journal)
// and n new ones, whose amounts are added to fresh. It returns the number
// of dead letters.
func dlqCredits(t *testing.T, l *ledger, ctx context.Context, n int, fresh *sendReport) int {
	t.Helper()
	type credit struct {
		ID      string `json:"id"`
		Account string `json:"account"`
		Amount  int64  `json:"amount"`
	}
	var credits []credit
	p := dynamodb.NewScanPaginator(l.ddb, &dynamodb.ScanInput{TableName: aws.String(l.name + "-accounts")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Items {
			pk := item["account"].(*ddbtypes.AttributeValueMemberS).Value
			id, ok := strings.CutPrefix(pk, "~credit#")
			if !ok {
				continue
			}
			amount, _ := strconv.ParseInt(item["amount"].(*ddbtypes.AttributeValueMemberN).Value, 10, 64)
			credits = append(credits, credit{id, item["credit_account"].(*ddbtypes.AttributeValueMemberS).Value, amount})
		}
	}
	prefix := testenv.Name("redriven")
	for i := range n {
		c := credit{fmt.Sprintf("%s-%05d", prefix, i), fmt.Sprintf("acct-%03d", i%20), int64(1 + rand.IntN(1000))}
		credits = append(credits, c)
		fresh.Distinct++
		fresh.Total += c.Amount
		fresh.Accounts[c.Account] += c.Amount
	}
	str := func(v string) sqstypes.MessageAttributeValue {
		return sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	for start := 0; start < len(credits); start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i, c := range credits[start:min(start+10, len(credits))] {
			// The body exactly as `ledger send` wrote it: the same key with
			// another body would be (rightly) dead-lettered as key reuse.
			body, _ := json.Marshal(map[string]any{"id": c.ID, "account": c.Account, "amount": c.Amount})
			failure, _ := json.Marshal(deadletter.Failure{
				Error: "permanent: downstream unavailable", Class: consumer.ClassPermanent, SourceQueue: l.urls.queue,
				Attempts: 1, OriginalMessageID: fmt.Sprintf("orig-%d", start+i), FailedAt: time.Now().Add(-time.Minute),
			})
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(body)),
				MessageAttributes: map[string]sqstypes.MessageAttributeValue{
					consumer.AttrID:        str(c.ID),
					deadletter.AttrFailure: str(string(failure)),
				},
			})
		}
		out, err := l.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(l.urls.dlq), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("fill the DLQ: %v %+v", err, out)
		}
	}
	return len(credits)
}
