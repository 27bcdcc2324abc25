package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

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
// journal row, for one TransactWriteItems with the dedupe record. The
// row keeps when the credit was first applied (now, the handler's time:
// the transaction commits after it) and, for a delayed credit, its
// not-before time, so that `ledger audit` can tell one applied early.
func creditWrites(table string, c credit, now time.Time) []ddbtypes.TransactWriteItem {
	set := "ADD applied :one SET credit_account = :account, amount = :amount, applied_at = if_not_exists(applied_at, :now)"
	values := map[string]ddbtypes.AttributeValue{
		":one":     &ddbtypes.AttributeValueMemberN{Value: "1"},
		":account": &ddbtypes.AttributeValueMemberS{Value: c.Account},
		":amount":  &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(c.Amount, 10)},
		":now":     &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
	}
	if !c.NotBefore.IsZero() {
		set += ", not_before = :nb"
		values[":nb"] = &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(c.NotBefore.UnixMilli(), 10)}
	}
	return []ddbtypes.TransactWriteItem{
		{Update: &ddbtypes.Update{
			TableName:                 aws.String(table),
			Key:                       map[string]ddbtypes.AttributeValue{"account": &ddbtypes.AttributeValueMemberS{Value: c.Account}},
			UpdateExpression:          aws.String("ADD balance :amount"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":amount": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(c.Amount, 10)}},
		}},
		{Update: &ddbtypes.Update{
			TableName:                 aws.String(table),
			Key:                       map[string]ddbtypes.AttributeValue{"account": &ddbtypes.AttributeValueMemberS{Value: journalPrefix + c.ID}},
			UpdateExpression:          aws.String(set),
			ExpressionAttributeValues: values,
		}},
	}
}

// auditReport is what `ledger audit -json` prints.
type auditReport struct {
	Credits      int      `json:"credits"`       // credits applied at least once
	Total        int64    `json:"total"`         // their amounts added up once each
	AppliedTwice int      `json:"applied_twice"` // credits applied more than once
	Examples     []string `json:"examples,omitempty"`
	// Delayed counts the credits sent with -not-before; Early those of
	// them first applied before their time (EarlyExamples names some).
	Delayed       int      `json:"delayed"`
	Early         int      `json:"early"`
	EarlyExamples []string `json:"early_examples,omitempty"`
}

// delayed records a journal row's not-before time and first application
// (milliseconds; notBefore 0 for a credit sent without one).
func (r *auditReport) delayed(id string, notBefore, appliedAt int64) {
	if notBefore == 0 {
		return
	}
	r.Delayed++
	if appliedAt < notBefore {
		r.Early++
		r.EarlyExamples = append(r.EarlyExamples, id)
	}
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
			rep.delayed(strings.TrimPrefix(id.Value, journalPrefix), number(item["not_before"]), number(item["applied_at"]))
		}
	}
	return printAudit(stdout, rep, *asJSON)
}

func printAudit(stdout io.Writer, rep auditReport, asJSON bool) error {
	for _, ex := range []*[]string{&rep.Examples, &rep.EarlyExamples} {
		sort.Strings(*ex)
		if len(*ex) > 10 {
			*ex = (*ex)[:10]
		}
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	fmt.Fprintf(stdout, "%d credits applied (total %d); %d applied more than once %v; %d delayed, %d of them applied before their time %v\n",
		rep.Credits, rep.Total, rep.AppliedTwice, rep.Examples, rep.Delayed, rep.Early, rep.EarlyExamples)
	return nil
}

func number(v ddbtypes.AttributeValue) int64 {
	if n, ok := v.(*ddbtypes.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(n.Value, 10, 64)
		return x
	}
	return 0
}
