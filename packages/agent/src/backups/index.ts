export { readBackupMinuteMs } from "./env.ts";
export { type BackupReport, EtcdBackups, type EtcdBackupsOptions } from "./etcd-backups.ts";
