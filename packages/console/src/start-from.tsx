// The create form's choice of what a unit starts from (issue #18): an image (`base`, the default)
// or one of the organization's templates. A choice is `image:NAME` or `template:NAME`.
import { listImages, listTemplates } from "./api.js";
import { ErrorLine, usePoll } from "./ui.js";

export const BASE = "image:base";

/** The create request's field for a choice: `{image}` or `{template}`, never both. */
export function startBody(choice: string): { image: string } | { template: string } {
  const at = choice.indexOf(":");
  const name = choice.slice(at + 1);
  return choice.slice(0, at) === "template" ? { template: name } : { image: name };
}

export function StartFrom(props: { value: string; onChange: (choice: string) => void; disabled?: boolean }) {
  const lists = usePoll((signal) => Promise.all([listImages(signal), listTemplates(signal)]), []);
  const [images, templates] = lists.data ?? [[], []];
  const choices = [...images.map((i) => `image:${i.name}`), ...templates.map((t) => `template:${t.name}`)];
  return (
    <>
      <label>
        Start from
        <select
          name="start"
          value={props.value}
          disabled={props.disabled}
          title={props.disabled ? "A fork keeps its unit's image" : undefined}
          onChange={(e) => props.onChange(e.currentTarget.value)}
        >
          {/* The choice before the lists are in (or one they no longer hold) stays selectable. */}
          {!choices.includes(props.value) && (
            <option value={props.value}>
              {props.value.replace(/^image:/, "").replace(/^template:(.*)/, "$1 (template)")}
            </option>
          )}
          {images.length > 0 && (
            <optgroup label="Images">
              {images.map((i) => (
                <option key={i.name} value={`image:${i.name}`}>
                  {i.name}
                </option>
              ))}
            </optgroup>
          )}
          {templates.length > 0 && (
            <optgroup label="Templates">
              {templates.map((t) => (
                <option key={t.name} value={`template:${t.name}`}>
                  {t.name}
                </option>
              ))}
            </optgroup>
          )}
        </select>
      </label>
      <ErrorLine error={lists.error} />
    </>
  );
}
