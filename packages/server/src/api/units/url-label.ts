import { randomString } from "../../auth/tokens.js";

const URL_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

/** A new unit's URL label (spec 2.1): `<name>-<8 random letters and digits>`, unique across the server. */
export const newUrlLabel = (name: string): string => `${name}-${randomString(8, URL_ALPHABET)}`;
