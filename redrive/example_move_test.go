package redrive_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/awsconfig"
	"github.com/sqsonce/sqsonce/redrive"
)

// A dry run shows what a filtered move would do; the move then sends the
// matching dead letters back to their source queue and leaves the rest in
// the DLQ. awsconfig.Load reads the standard variables, so the same
// program runs against AWS or, with the variables the local stack writes
// (make stack-up), against it. With three dead letters in "orders-dlq",
// two failed with "payment gateway: timeout" and one with "invalid
// payload", it prints:
//
//	dry run: would move 2, skip 1, to map[orders:2]
//	moved 2, skipped 1, failed 0, refused 0
func ExampleRedriver_Move() {
	ctx := context.Background()
	awsCfg, err := awsconfig.Load(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r, err := redrive.New(redrive.Config{Client: sqs.NewFromConfig(awsCfg)})
	if err != nil {
		log.Fatal(err)
	}
	dlq, err := r.Queue(ctx, "orders-dlq")
	if err != nil {
		log.Fatal(err)
	}
	only, err := redrive.ParseFilters("class=permanent", "error~timeout")
	if err != nil {
		log.Fatal(err)
	}

	plan, err := r.Plan(ctx, dlq, redrive.MoveOptions{Filters: only})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("dry run: would move %d, skip %d, to %v\n", plan.Matched, plan.Skipped, plan.ByDestination)

	sum, err := r.Move(ctx, dlq, redrive.MoveOptions{Filters: only})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("moved %d, skipped %d, failed %d, refused %d\n", sum.Moved, sum.Skipped, sum.Failed, sum.Refused)
}
