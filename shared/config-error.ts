/** A configuration problem found at boot: the message names the variable, never its value. */
export class ConfigError extends Error {}
