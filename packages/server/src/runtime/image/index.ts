export { type BuildImageOptions, type BuildProgress, type BuildStep, buildImage } from "./build.js";
export {
  cachedImage,
  deleteImage,
  IMAGE_CONTENT_VERSION,
  type ImageManifest,
  type ImagePaths,
  imagePaths,
  readImageManifest,
} from "./image-store.js";
export {
  DEBIAN_SUITE,
  debianSources,
  defaultImageName,
  IMAGE_PACKAGES,
  IMAGE_VARIANTS,
  type ImageVariant,
  imageNameProblem,
} from "./packages.js";
export { PLACEHOLDER_HOSTNAME, PLACEHOLDER_HOSTS, UNIT_USER } from "./rootfs-config.js";
export { shiftId, shiftTree, UID_RANGE, UID_SHIFT, unshiftId } from "./shift.js";
export { DEFAULT_TEST_POOL_DIR, TEST_IMAGE_NAME, type TestImage, testImage, testPoolDir } from "./test-image.js";
