package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// export --delete makes the new file's directory entry durable (fsync of
// the directory) before it deletes anything from the DLQ: syncing the file
// alone leaves a crash able to lose the file, and with it the messages.
func TestExportDeleteSyncsDirectory(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 4, "permanent")
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.jsonl")
	var synced []string
	inDLQ := -1
	var out, errOut bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, syncDir: func(d string) error {
		synced = append(synced, d)
		inDLQ = count(t, client, dlq)
		return syncDir(d)
	}}
	if code := a.run(context.Background(), []string{"export", dlq, file, "--delete", "--yes"}); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("directory syncs %v, want [%s]", synced, dir)
	}
	if inDLQ != 4 {
		t.Fatalf("the directory was synced with %d messages left in the DLQ, want all 4 (before any delete)", inDLQ)
	}
	if count(t, client, dlq) != 0 {
		t.Fatal("export --delete left messages")
	}
}
