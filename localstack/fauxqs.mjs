// Starts fauxqs (its dist/app.js is FAUXQS_MAIN) with request logging off: its
// own command-line entry point turns the logger on whatever FAUXQS_LOGGER
// says, and logs every request. FAUXQS_PORT and FAUXQS_DEFAULT_REGION set the
// port and region; fauxqs listens on every interface (it hard-codes that).
// Stopped by PID.
import { pathToFileURL } from "node:url";

const { startFauxqs } = await import(pathToFileURL(process.env.FAUXQS_MAIN).href);
await startFauxqs({ logger: false });
