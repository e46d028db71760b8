export {
  CertificateRefusedError,
  type CertificateRequest,
  type CommandContext,
  type CommandHandler,
  type CommandHandlers,
  LinkClient,
  type LinkClientEvents,
  type LinkClientOptions,
  type LinkCloseInfo,
  type LinkLog,
  LinkUnavailableError,
  type SignedCertificatePem,
} from "./client.ts";
export { COMMAND_RECORD_FILE, type CommandOutcome, CommandRecord, type RecordEntry } from "./command-record.ts";
export { linkUrl } from "./url.ts";
