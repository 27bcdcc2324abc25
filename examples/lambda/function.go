package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/examples/orders"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// maxFunctionTimeout is Lambda's longest timeout. The dedupe lease is set
// to it: the adapter caps it at each invocation's deadline, so a claim
// covers the whole invocation and never outlives it.
const maxFunctionTimeout = 15 * time.Minute

// newFunction builds the adapter from the environment. It runs once per
// execution environment (cold start), outside the handler.
func newFunction(ctx context.Context, getenv func(string) string, logOut io.Writer) (*sqslambda.Handler, *zap.Logger, error) {
	var level zapcore.Level
	if err := level.UnmarshalText([]byte(cmp.Or(getenv("LOG_LEVEL"), "info"))); err != nil {
		return nil, nil, fmt.Errorf("LOG_LEVEL=%q: use debug, info, warn or error", getenv("LOG_LEVEL"))
	}
	concurrency := 1
	if s := getenv("CONCURRENCY"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, nil, fmt.Errorf("CONCURRENCY=%q: want an integer ≥ 1", s)
		}
		concurrency = n
	}
	var timeout time.Duration
	if s := getenv("AWS_LAMBDA_FUNCTION_TIMEOUT"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, nil, fmt.Errorf("AWS_LAMBDA_FUNCTION_TIMEOUT=%q: want whole seconds", s)
		}
		timeout = time.Duration(n) * time.Second
	}
	// JSON on stderr (CloudWatch Logs), unsampled: at debug level every
	// record's "settled" line is kept.
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(zapcore.AddSync(logOut)), level))

	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("load AWS config: %w", err)
	}
	var mw []consumer.Middleware
	if table := getenv("DEDUPE_TABLE"); table != "" {
		store, err := dedupedynamo.New(dedupedynamo.Config{
			Client:    dynamodb.NewFromConfig(awsCfg),
			Table:     table,
			Namespace: cmp.Or(getenv("DEDUPE_NAMESPACE"), getenv("QUEUE_URL"), "orders"),
			Logger:    logger,
		})
		if err != nil {
			return nil, nil, err
		}
		dd, err := dedupe.New(dedupe.Config{Store: store, Lease: maxFunctionTimeout, Logger: logger})
		if err != nil {
			return nil, nil, err
		}
		mw = append(mw, dd.Wrap)
	}
	h, err := sqslambda.New(sqslambda.Config{
		Client:          sqs.NewFromConfig(awsCfg),
		Handler:         orders.Handler(logger),
		Middleware:      mw,
		QueueURL:        getenv("QUEUE_URL"),
		Concurrency:     concurrency,
		FunctionTimeout: timeout,
		Logger:          logger,
	})
	if err != nil {
		return nil, nil, err
	}
	return h, logger, nil
}
