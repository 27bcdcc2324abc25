// Starts local-aws-sqs on 127.0.0.1 at the port given as the only argument.
// It answers ListDeadLetterSourceQueues and the message-move-task calls that
// fauxqs lacks (it copies instead of moving). Stopped by PID.
const { createSqsServer } = require(process.env.LOCAL_AWS_SQS_MAIN);

const port = Number(process.argv[2]);
createSqsServer({
  port,
  hostname: "127.0.0.1",
  region: "us-east-1",
  accountId: "000000000000",
  emulateQueueCreationLifecycle: false,
}).then(
  () => console.log(`local-aws-sqs listening on 127.0.0.1:${port}`),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
