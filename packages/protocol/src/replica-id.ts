/**
 * A control-plane replica's id (KEELSON_REPLICA_ID): keelson-server's setting checks it, and the
 * operator's tool checks it before writing it into a replica's server.env.
 */
export const REPLICA_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
export const REPLICA_ID_RULE = "1-63 letters, digits, dots, dashes or underscores, starting with a letter or digit";
