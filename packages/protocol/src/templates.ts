import { type Static, Type } from "@sinclair/typebox";
import { UNIT_NAME_MAX_LENGTH, UNIT_NAME_PATTERN, UNIT_NAME_RULES } from "./names.js";

/** Issue #18: a template's name follows the unit name rules (unique within the organization). */
export const TemplateName = Type.String({
  minLength: 1,
  maxLength: UNIT_NAME_MAX_LENGTH,
  pattern: UNIT_NAME_PATTERN,
  description: `Template name: ${UNIT_NAME_RULES}.`,
  "x-message": `must be ${UNIT_NAME_RULES}`,
});

/** Issue #18 `POST /v1/templates`: publishes a unit's checkpoint as an organization template. */
export const CreateTemplateRequest = Type.Object(
  {
    name: TemplateName,
    description: Type.Optional(Type.String({ maxLength: 1000 })),
    from: Type.Object(
      {
        unit: Type.String({ maxLength: 256, description: "A unit of the organization" }),
        checkpoint: Type.String({ maxLength: 32, description: "One of its checkpoints, e.g. v3" }),
      },
      { additionalProperties: false, description: "The checkpoint whose files and policies the template keeps" },
    ),
  },
  { additionalProperties: false },
);
export type CreateTemplateRequest = Static<typeof CreateTemplateRequest>;

/** Issue #18: an organization template: a checkpoint's files (services included) and policies, frozen. */
export const Template = Type.Object(
  {
    id: Type.String({ description: "`tpl-<uuid>`" }),
    name: Type.String(),
    description: Type.String(),
    organization: Type.String({ description: "Organization slug" }),
    source: Type.Object(
      { unit: Type.String(), checkpoint: Type.String() },
      { description: "The unit and checkpoint it was published from (the unit may be gone since)" },
    ),
    environment_version: Type.Union([Type.String(), Type.Null()]),
    created_at: Type.String({ format: "date-time" }),
  },
  { title: "Template" },
);
export type Template = Static<typeof Template>;

export const TemplateList = Type.Object({ templates: Type.Array(Template) }, { title: "TemplateList" });
export type TemplateList = Static<typeof TemplateList>;
