export {
  type BuildImageOptions,
  type BuildProgress,
  type BuildStep,
  buildImage,
  cachedImage,
  deleteImage,
  IMAGE_CONTENT_VERSION,
  type ImageManifest,
  type ImagePaths,
  imagePaths,
  PLACEHOLDER_HOSTNAME,
  PLACEHOLDER_HOSTS,
  readImageManifest,
  UNIT_USER,
} from "./build.js";
export {
  DEBIAN_SUITE,
  debianSources,
  defaultImageName,
  IMAGE_PACKAGES,
  IMAGE_VARIANTS,
  type ImageVariant,
  imageNameProblem,
} from "./packages.js";
export { shiftId, shiftTree, UID_RANGE, UID_SHIFT, unshiftId } from "./shift.js";
export { DEFAULT_TEST_POOL_DIR, TEST_IMAGE_NAME, type TestImage, testImage, testPoolDir } from "./test-image.js";
