package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// journalPrefix marks the journal rows of the accounts table: one per
// applied credit, "~credit#<id>", counting how often it was applied. The
// balance and the journal row change in the same transaction as the dedupe
// record, so `ledger audit` can prove that no credit was applied twice.
const journalPrefix = "~credit#"

// creditWrites are a credit's effects: the account's balance and its
// journal row, for one TransactWriteItems with the dedupe record.
func creditWrites(table string, c credit) []ddbtypes.TransactWriteItem {
	return []ddbtypes.TransactWriteItem{
		{Update: &ddbtypes.Update{
			TableName:                 aws.String(table),
			Key:                       map[string]ddbtypes.AttributeValue{"account": &ddbtypes.AttributeValueMemberS{Value: c.Account}},
			UpdateExpression:          aws.String("ADD balance :amount"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":amount": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(c.Amount, 10)}},
		}},
		{Update: &ddbtypes.Update{
			TableName:        aws.String(table),
			Key:              map[string]ddbtypes.AttributeValue{"account": &ddbtypes.AttributeValueMemberS{Value: journalPrefix + c.ID}},
			UpdateExpression: aws.String("ADD applied :one SET credit_account = :account, amount = :amount"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":one":     &ddbtypes.AttributeValueMemberN{Value: "1"},
				":account": &ddbtypes.AttributeValueMemberS{Value: c.Account},
				":amount":  &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(c.Amount, 10)},
			},
		}},
	}
}

// auditReport is what `ledger audit -json` prints.
type auditReport struct {
	Credits      int      `json:"credits"`       // credits applied at least once
	Total        int64    `json:"total"`         // their amounts added up once each
	AppliedTwice int      `json:"applied_twice"` // credits applied more than once
	Examples     []string `json:"examples,omitempty"`
}

func cmdAudit(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("audit", stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	n, c, err := g.open(ctx, fs, args, nil)
	if err != nil {
		return err
	}
	defer c.close()
	var rep auditReport
	if n.Store == storePostgres {
		if rep, err = auditPostgres(ctx, c.pg); err != nil {
			return err
		}
		return printAudit(stdout, rep, *asJSON)
	}
	p := dynamodb.NewScanPaginator(c.ddb, &dynamodb.ScanInput{TableName: aws.String(n.Ledger), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("scan %s: %w (run `ledger setup` first)", n.Ledger, err)
		}
		for _, item := range page.Items {
			id, _ := item["account"].(*ddbtypes.AttributeValueMemberS)
			if id == nil || !strings.HasPrefix(id.Value, journalPrefix) {
				continue
			}
			applied, amount := number(item["applied"]), number(item["amount"])
			rep.Credits++
			rep.Total += amount
			if applied > 1 {
				rep.AppliedTwice++
				rep.Examples = append(rep.Examples, strings.TrimPrefix(id.Value, journalPrefix))
			}
		}
	}
	return printAudit(stdout, rep, *asJSON)
}

func printAudit(stdout io.Writer, rep auditReport, asJSON bool) error {
	sort.Strings(rep.Examples)
	if len(rep.Examples) > 10 {
		rep.Examples = rep.Examples[:10]
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	fmt.Fprintf(stdout, "%d credits applied (total %d); %d applied more than once %v\n", rep.Credits, rep.Total, rep.AppliedTwice, rep.Examples)
	return nil
}

func number(v ddbtypes.AttributeValue) int64 {
	if n, ok := v.(*ddbtypes.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(n.Value, 10, 64)
		return x
	}
	return 0
}
